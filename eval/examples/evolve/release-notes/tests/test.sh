#!/bin/bash
if head -n 1 /workspace/NOTES.md | grep -qx '## 2.0' && grep -q '^- ' /workspace/NOTES.md; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
