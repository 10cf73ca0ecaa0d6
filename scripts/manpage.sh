#!/usr/bin/env bash
# scripts/manpage.sh COIL > coil.1: coil's man page, made from the command's own help
# (`coil --help` and each command's --help), so it says what the binary says. Run by the
# build; installed as share/man/man1/coil.1.
set -euo pipefail
coil=$1
version=$("$coil" --version | awk '{print $2}')
# Help text as troff: backslashes and leading dots escaped, kept verbatim (.nf).
verbatim() { sed -e 's/\\/\\e/g' -e 's/^\./\\\&./' -e "s/^'/\\\\\&'/"; }
cat <<HEAD
.TH COIL 1 "" "coil $version" "User Commands"
.SH NAME
coil \- compile, run, benchmark and train deep-learning models
.SH SYNOPSIS
.B coil
.I COMMAND
.RI [ ARGS ]
.br
.B coil
.I COMMAND
.B \-\-help
.SH DESCRIPTION
.nf
HEAD
"$coil" --help | verbatim
echo ".fi"
for cmd in $("$coil" --help | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1} on && /^$/ {exit}'); do
    echo ".SH COIL $(echo "$cmd" | tr a-z A-Z)"
    echo ".nf"
    "$coil" "$cmd" --help | verbatim
    echo ".fi"
done
cat <<TAIL
.SH SEE ALSO
The README and docs/ (ARCHITECTURE.md, IR.md, LANGUAGE.md) in coil's source; the C API
in include/coil/coil.h.
TAIL
