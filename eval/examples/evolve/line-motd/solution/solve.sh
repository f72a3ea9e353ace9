#!/bin/bash
printf '%s\n' 'maintenance at noon' > /workspace/motd.txt
