"""The ``mempager`` command line. Faces the user; the kernel never imports it."""
