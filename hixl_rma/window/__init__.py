"""The window layer: one window, by MPI chapter (creation and its table in
``core``, synchronization in ``epochs``, ``accumulate``, ``notify``,
``batch``, ``attributes``, ``dynamic``, ``shared``, requests), over the
buffers, the runtime and the ground; the faces (``hixl_rma.win``,
``hixl_rma.hixl_api``) are what users call."""
