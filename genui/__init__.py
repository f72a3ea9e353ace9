"""Generated UI: checking what L3 (or any adapter with ``genui`` on) answers as UI, feeding
the problems back for repair, and previewing it in a browser.

- ``report``     Problem and Checked: a UI and what the checker found, with locations
- ``extract``    the UIs in an answer (fenced ``ui4a/tsx``, ``<a2ui-json>`` / ``a2ui`` blocks)
                 or in ``render_ui`` tool arguments
- ``a2ui``       A2UI streams: parsing, the official JSON Schemas, the catalog checks
- ``tsx``        UI4A TSX modules: esbuild, TypeScript and the forbidden-API walk (Node)
- ``review``     the repair rounds of one turn and the ``render_ui`` tool
- ``preview``    the preview page (A2UI through the Lit renderer, TSX in a sandboxed iframe)
- ``toolchain``  the npm cache ``mol genui setup`` fills, used offline from then on

Nothing here imports Node or npm at import time; checks that need the toolchain raise
``GenUISetupError`` naming ``mol genui setup`` when it is missing.
"""
