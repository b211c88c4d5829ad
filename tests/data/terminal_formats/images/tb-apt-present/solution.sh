#!/bin/bash
cd /app && make
