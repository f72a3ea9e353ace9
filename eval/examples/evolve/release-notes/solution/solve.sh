#!/bin/bash
printf '## 2.0\n\n- First stable release.\n' > /workspace/NOTES.md
