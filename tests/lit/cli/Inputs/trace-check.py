# trace-check.py — for the tests of `--trace`: reads a Chrome trace-event file strictly
# (what Perfetto and chrome://tracing open), checks each event has the fields its phase
# needs, that steps nest inside their run on one track and that no step ends before it
# begins, then prints each distinct step name once, sorted, for FileCheck.
import json
import sys

NEEDED = {'X': ('name', 'ts', 'dur', 'pid', 'tid'), 'M': ('name', 'pid', 'args')}


def refuse(why):
    sys.exit('trace-check: ' + why)


def main(path):
    doc = json.load(open(path), parse_constant=lambda c: refuse(c + ' is not JSON'))
    events = doc.get('traceEvents')
    if not isinstance(events, list) or not events:
        refuse('no traceEvents')
    runs, steps = [], []
    for ev in events:
        for field in NEEDED.get(ev.get('ph'), ()):
            if field not in ev:
                refuse('%s event without %s: %s' % (ev.get('ph'), field, ev))
        if ev.get('ph') != 'X':
            continue
        if ev['dur'] < 0:
            refuse('negative duration: %s' % ev)
        (steps if ev.get('cat') == 'step' else runs if ev.get('cat') == 'run' else []).append(ev)
    for s in steps:
        if not any(r['pid'] == s['pid'] and r['tid'] == s['tid'] and
                   r['ts'] <= s['ts'] + 1e-3 and s['ts'] + s['dur'] <= r['ts'] + r['dur'] + 1e-3
                   for r in runs):
            refuse('step outside every run: %s' % s)
    print('runs %d' % len(runs))
    for name in sorted({s['name'] for s in steps}):
        print('step ' + name)


main(sys.argv[1])
