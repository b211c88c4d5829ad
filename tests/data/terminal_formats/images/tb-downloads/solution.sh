#!/bin/bash
/opt/tool/bin/tool > /app/out.txt
