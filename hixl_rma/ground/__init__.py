"""The ground: errors, constants, settings (``config``), priorities and
logging, which every layer above may use and which import nothing of the
package."""
