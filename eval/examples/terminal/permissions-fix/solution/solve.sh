#!/bin/bash
cd /workspace
sed -i 's/\r$//' bin/run.sh
chmod +x bin/run.sh
