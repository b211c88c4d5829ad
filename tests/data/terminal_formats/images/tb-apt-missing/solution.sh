#!/bin/bash
cd /app && frobc prog.frob -o prog
