#!/bin/bash
echo ready
