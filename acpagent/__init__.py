"""``mol acp``: mol as an Agent Client Protocol agent, driven by an editor over stdio.

An editor (Zed, JetBrains, Neovim plugins, ...) starts ``mol acp --hcp FILE`` and speaks
ACP (JSON-RPC, one message per line) on its stdin and stdout; see docs/acp.md. The rooms:

- ``sdk``: the only module that imports the ACP SDK (``acp``): method names, the protocol
  version, the connection, the models of what mol reads; errors translated both ways;
- ``wire``: stdin and stdout taken for the protocol alone, the messages' lines;
- ``stdio``: the main loop (store, runtime, the sessions' task group, the connection);
- ``agent``: each method the editor calls; ``session``: an open session, its prompts;
- ``updates``: a turn's events as ``session/update`` notifications, live and replayed;
- ``permission``: ``session/request_permission`` for ``ask`` tools, as an ``Approval``;
- ``clienttools``: the editor's file system and terminals serving mol's file and terminal
  tools (``[sandbox] acp_client``); ``inputs``: prompts, MCP servers, slash commands;
  ``text``: what a person reads of model and tool text.

Like ``mol.server``, it drives the runtime through ``mol.runtime``'s public names only.
Importing this package imports nothing else.
"""
