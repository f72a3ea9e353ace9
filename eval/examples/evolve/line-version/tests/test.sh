#!/bin/bash
if printf '%s\n' '1.4.2' | cmp -s - /workspace/VERSION; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
