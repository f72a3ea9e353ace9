#!/bin/bash
cd /workspace && mkdir -p src docs tests
