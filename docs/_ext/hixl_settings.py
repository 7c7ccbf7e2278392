"""The ``hixl-settings`` directive: the table of every ``HIXL_RMA_*`` setting,
made from ``hixl_rma.ground.config.SETTINGS`` when the docs are built, so the page
cannot drift from what the library reads.

``SETTINGS`` maps a name to ``(default, who reads it and when, what it does)``.
"""
from docutils import nodes
from docutils.parsers.rst import Directive


def _cell(text, literal=False):
    entry = nodes.entry()
    para = nodes.paragraph()
    para += nodes.literal(text=text) if literal and text else nodes.Text(text or "unset")
    entry += para
    return entry


def settings_table(settings):
    """A docutils table node of ``settings`` (name -> (default, read, what))."""
    headers = ("variable", "default", "read", "what it does")
    table = nodes.table(classes=["hixl-settings"])
    group = nodes.tgroup(cols=len(headers))
    table += group
    for width in (22, 8, 20, 50):
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    row = nodes.row()
    for title in headers:
        row += _cell(title)
    head += row
    group += head
    body = nodes.tbody()
    for name, (default, read, what) in settings.items():
        row = nodes.row()
        row += _cell(name, literal=True)
        row += _cell(default, literal=True)
        row += _cell(read)
        row += _cell(what)
        body += row
    group += body
    return table


class SettingsDirective(Directive):
    has_content = False

    def run(self):
        from hixl_rma.ground.config import SETTINGS

        return [settings_table(SETTINGS)]


def setup(app):
    app.add_directive("hixl-settings", SettingsDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
