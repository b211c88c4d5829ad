#!/bin/bash
python3 -m frobnicate /app/input.txt > /app/output.txt
