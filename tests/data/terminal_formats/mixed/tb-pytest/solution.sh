#!/bin/bash
cd /app
tr a-z A-Z < names.txt > upper.txt
