"""What an episode leaves behind and what is done with it: the recording wrappers
(``recording``), the file format (``format``), replay without a model (``replay``), the HCP
paths an episode read (``reads``) and trajectory comparison (``diff``)."""
