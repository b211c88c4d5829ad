set -e
printf 'alice.smith@mail.example.com\nbob@example.org\nops-team@corp.example.net\n' | cmp - emails.txt
