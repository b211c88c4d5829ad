#!/bin/bash
cd /app && sed -i 's/8080/9090/' server.conf
