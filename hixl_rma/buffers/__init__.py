"""The buffers layer: parsing origins and targets (``datatypes``), the
reduction operations (``ops``) and device memory (``device``), over the
runtime and the ground. Tools may use it to read buffers as the library
does."""
