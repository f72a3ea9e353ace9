"""The ``mol`` command line: argument parsing (``main``) and one module per command group
(``commands``). The top floor: it drives everything below it."""
