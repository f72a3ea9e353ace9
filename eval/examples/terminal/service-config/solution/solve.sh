#!/bin/bash
cd /workspace/service
sed -i -e 's/^port = .*/port = 8080/' -e 's/^enabled = .*/enabled = true/' config.ini
