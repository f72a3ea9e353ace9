"""The bash programs a sandbox runs: the control shell, the command shell and each command.

Three kinds of process talk to the runtime, and only two of them are trusted:

- the **control shell** (``CONTROL_SCRIPT``): the container's main process, root with
  only ``CAP_KILL``, reached through the attach socket. It only runs builtins, at normal
  priority, so it answers even while a fork bomb holds every pid;
- the **command shell** (``SHELL_SCRIPT``): root with ``CAP_SETUID``/``CAP_SETGID``, reached
  through one ``docker exec`` socket, at ``nice 19``. It never evaluates a command itself:
  per command it forks a child that drops to the sandbox user (``setpriv``, clearing every
  capability and the bounding set) and runs ``COMMAND_SCRIPT``, waits for that child, and
  prints the end marker ``__mol_<token>_<status>``;
- the **command** (``COMMAND_SCRIPT``): the sandbox user's bash. It restores the shell
  state the previous command saved (variables, functions, options, working directory,
  ``$?``), evaluates the command, and saves the state again when it exits.

The end marker's token reaches the two root shells over their stdin, never in an argument
or the environment; a command, running as another user, can read neither their memory
nor their file descriptors, nor signal them. So it cannot learn the token, cannot print a
marker, and cannot end the command early: the command is over when its process is.
"""

from __future__ import annotations

CONTROL_SCRIPT = r"""
IFS= builtin read -r __mol_token
__mol_mark="__mol_${__mol_token}_"
builtin unset __mol_token
__mol_say() { builtin printf '%s%s\n' "$__mol_mark" "$1"; }
__mol_child() {
  local p stat
  local -a f
  __mol_cs=-1 __mol_cp=0 __mol_np=0
  for p in /proc/[0-9]*; do
    builtin read -r stat 2>/dev/null <"$p/stat" || continue
    builtin read -r -a f <<<"${stat##*) }"
    p=${p#/proc/}
    (( f[19] >= $2 && p > __mol_np )) && __mol_np=$p
    [[ ${f[1]} == "$1" ]] || continue
    (( f[19] > __mol_cs || (f[19] == __mol_cs && p > __mol_cp) )) && __mol_cs=${f[19]} __mol_cp=$p
  done
}
__mol_sweep() {
  local since=-1 first=0 up p stat pass found keep=$2 spare=" ${*:3} "
  local -a f stopped=()
  local -A seen=()
  if [[ $1 == *:* ]]; then
    since=${1%:*} first=${1#*:}
  elif [[ $1 == child ]]; then
    builtin read -r up _ </proc/uptime
    up=$(( 10#${up/./} ))
    __mol_child "$keep" "$up"
    since=$(( __mol_cp ? __mol_cs : up )) first=$(( __mol_cp ? __mol_cp : __mol_np + 1 ))
  fi
  for (( pass = 0; pass < 100; pass++ )); do
    found=0
    for p in /proc/[0-9]*; do
      p=${p#/proc/}
      (( p == 1 || p == $$ )) && continue
      builtin read -r stat 2>/dev/null <"/proc/$p/stat" || continue
      builtin read -r -a f <<<"${stat##*) }"
      [[ -n ${seen[$p:${f[19]}]} ]] && continue  # by pid and start: pids are reused
      (( f[19] > since || (f[19] == since && p >= first) )) || continue
      [[ $spare == *" $p:${f[19]} "* || ${f[1]} == "$keep" ]] && continue
      builtin kill -STOP "$p" 2>/dev/null || continue
      seen[$p:${f[19]}]=1 stopped+=("$p") found=1
    done
    (( found )) || break
  done
  (( ${#stopped[@]} )) && builtin kill -KILL "${stopped[@]}" 2>/dev/null
  __mol_say "${#stopped[@]}:$since:$first"
}
__mol_kill_shell() {
  local stat n=0
  local -a f
  if builtin read -r stat 2>/dev/null <"/proc/${1#*:}/stat"; then
    builtin read -r -a f <<<"${stat##*) }"
    [[ ${f[19]} == "${1%:*}" ]] && builtin kill -KILL "${1#*:}" 2>/dev/null && n=1
  fi
  __mol_say "$n"
}
__mol_started() {
  local stat
  local -a f
  builtin read -r stat 2>/dev/null <"/proc/$1/stat" || { __mol_say -1; return; }
  builtin read -r -a f <<<"${stat##*) }"
  __mol_say "${f[19]}"
}
__mol_count() { local -a all=(/proc/[0-9]*); __mol_say "${#all[@]}"; }
__mol_kill() { builtin kill "$@" 2>/dev/null; __mol_say "$?"; }
while IFS= builtin read -r __mol_line; do builtin eval "$__mol_line"; done
"""
"""The control shell. Its first input line is the marker token; then one request per line:

- ``__mol_sweep FROM KEEP PID:START...`` stops, then kills, every process that started at or
  after FROM and answers ``KILLED:FROM``. FROM is a ``START:PID`` boundary (start time in
  clock ticks, then pid: pids grow within a tick), ``-1`` for every process, or ``child``:
  the start of the newest child of KEEP (of the command shell: the running command's own
  shell), else the present tick past the newest pid started in it (nothing running; a
  process started later in that tick has a higher pid). It spares init, itself, the
  processes recorded as ``PID:START`` (pid and start time, so a reused pid is not spared)
  and the children of KEEP, which then get the chance to report. Start times are the kernel's, so
  what an earlier command left running is spared and nothing a command starts is;
  stopping first means nothing found can fork on meanwhile;
- ``__mol_kill_shell START:PID`` kills the command's shell a sweep's boundary names, if
  that pid is still the process that started then;
- ``__mol_started PID`` tells a process's start time; ``__mol_count`` counts processes;
  ``__mol_kill -SIG PID`` signals one.

Each answer is one marker line."""

SHELL_SCRIPT = r"""
exec 63<&0 </dev/null
IFS= builtin read -r -d '' -u 63 __mol_token || builtin exit 1
__mol_mark="__mol_${__mol_token}_"
builtin unset __mol_token
__mol_home=/
while IFS=: builtin read -r _ _ __mol_u _ _ __mol_h _; do
  [[ $__mol_u == "$1" ]] && __mol_home=$__mol_h && break
done </etc/passwd
if builtin command -v setpriv >/dev/null; then
  __mol_as=(setpriv --inh-caps=-all --bounding-set=-all)
  (( $1 == 0 )) || __mol_as+=(--reuid="$1" --regid="$2" --clear-groups)
  __mol_as+=(--)
elif (( $1 != 0 )); then
  builtin echo "the sandbox image has no setpriv (util-linux): commands cannot run as uid $1" >&2
  builtin exit 1
fi
__mol_script=$3 __mol_clean=$4
__mol_rc=0
builtin trap '' PIPE
__mol_spawn() {
  exec {__mol_in}> >(
    exec 63<&- 2>&1
    builtin export HOME=$__mol_home
    exec "${__mol_as[@]}" bash --noprofile --norc -c "$__mol_script" bash "$__mol_rc"
  )
  __mol_pid=$!
}
__mol_spawn
builtin printf '%s%d\n' "$__mol_mark" "$$"
while IFS= builtin read -r -d '' -u 63 __mol_cmd; do
  if [[ $__mol_cmd == c* ]]; then
    exec {__mol_c}> >(
      exec 63<&- {__mol_in}>&- 2>&1
      builtin export HOME=$__mol_home
      exec "${__mol_as[@]}" bash --noprofile --norc -c "$__mol_clean" bash
    )
    builtin printf '%s\0' "${__mol_cmd:1}" >&"$__mol_c"
    exec {__mol_c}>&-
    builtin wait "$!"
    builtin printf '%s%d\n' "$__mol_mark" "$?"
    continue
  fi
  builtin printf '%s\0' "${__mol_cmd:1}" >&"$__mol_in"
  exec {__mol_in}>&-
  builtin wait "$__mol_pid"
  __mol_rc=$?
  builtin printf '%s%d\n' "$__mol_mark" "$__mol_rc"
  __mol_spawn
done
"""
"""The command shell: ``$1``/``$2`` the sandbox user's uid and gid, ``$3`` the
``COMMAND_SCRIPT``, ``$4`` the ``CLEAN_SCRIPT``. Its first input is the marker token,
NUL-terminated; then each NUL-terminated command, after a letter saying how it runs (``s``:
in the shell state, ``c``: clean), runs in a child (stdin ``/dev/null``, stderr merged
into stdout) and is answered by a marker with the child's exit status. It prints its own
pid first. The child for the next ``s`` command is started as soon as one ends and waits
on a pipe for its command (having restored the state already), so that work happens
between commands; a ``c`` command gets a child of its own, which leaves that one waiting
and ``$?`` as it was."""

STATE_FILE = "/tmp/.mol-shell-state"
"""Where a command's shell state waits for the next command (the sandbox user's file)."""

COMMAND_SCRIPT = r"""
if [[ -f /tmp/.mol-shell-state && -O /tmp/.mol-shell-state ]]; then
  builtin source /tmp/.mol-shell-state
fi 2>/dev/null
IFS= builtin read -r -d '' __mol_cmd
exec </dev/null
builtin trap '{
  builtin unset -v __mol_cmd RANDOM SRANDOM SECONDS EPOCHSECONDS EPOCHREALTIME BASHPID \
    LINENO BASH_COMMAND BASH_SUBSHELL HISTCMD BASH_EXECUTION_STRING
  builtin declare -p
  builtin declare -f
  builtin printf "%s\n" "__mol_options() {"
  builtin set +o
  builtin shopt -p
  builtin umask -p
  builtin printf "builtin cd -- %q\nbuiltin return \"\$1\"\n}\n" "$PWD"
} 2>/dev/null >|/tmp/.mol-shell-state' EXIT
builtin declare -F __mol_options >/dev/null || __mol_options() { builtin return "$1"; }
if (( $1 )); then
  __mol_options "$1" 2>/dev/null || builtin eval "$__mol_cmd"
else
  __mol_options 0 2>/dev/null && builtin eval "$__mol_cmd"
fi
"""
"""One command, as the sandbox user: ``$1`` is the previous command's exit status.

The saved state is plain bash (``declare -p``, ``declare -f``, then ``__mol_options``
restoring ``set -o``/``shopt`` options, the umask and the working directory). The
options are restored last, by ``__mol_options STATUS``, which returns the previous
status: the command is evaluated as the right-hand side of ``||`` (or ``&&``), so ``$?``
is that status inside it and a restored ``set -e`` applies to the command but not to the
restoring itself. The state is saved by an ``EXIT`` trap (with ``>|``: a restored
``noclobber`` must not stop it), so ``exit`` keeps it too; a command killed at its
timeout, or one that sets its own ``EXIT`` trap, leaves the state as it was before it."""

CLEAN_SCRIPT = r"""
IFS= builtin read -r -d '' __mol_cmd
exec </dev/null
builtin eval "$__mol_cmd"
"""
"""One command with none of the shell state: for a command whose result must not depend
on anything earlier commands defined (a verifier run after an agent: its functions,
aliases, options or ``PATH`` could otherwise stand in for ``rm`` or ``tee``). It neither
restores nor saves the state, so the next ordinary command finds it as it was."""

LAUNCHER = [
    "bash", "--noprofile", "--norc", "-c",
    'if builtin command -v nice >/dev/null; then builtin exec nice -n 19 bash --noprofile '
    '--norc -c "$1" "${@:2}"; fi; builtin exec bash --noprofile --norc -c "$1" "${@:2}"',
    "bash",
]
"""Starts the command shell at ``nice 19`` where the image has ``nice``: commands inherit
it, so the control shell (at the default priority) gets the CPU before any of them."""


def shell_argv(uid: int, gid: int) -> list[str]:
    """The ``docker exec`` command line of a command shell for the sandbox user."""
    return [*LAUNCHER, SHELL_SCRIPT, "bash", str(uid), str(gid), COMMAND_SCRIPT, CLEAN_SCRIPT]


def control_argv() -> list[str]:
    """The container's command line: the control shell (the token comes on its stdin)."""
    return ["--noprofile", "--norc", "-c", CONTROL_SCRIPT, "bash"]
