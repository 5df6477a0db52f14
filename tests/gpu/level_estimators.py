"""Which estimator of a run's host-set figure moves least from run to run (issue 47, slices experiment):

    python tests/gpu/level_estimators.py RUNS_DIR

Per run and host-set time figure: the pooled median, the pooled 10th percentile, the best process's median, the
median process's median, the best process's first 5 samples; then each estimator's run-to-run spread.
"""
import glob, sys, numpy as np
from gpubench import results
from gpubench.levels import set_by_host
runs = sorted(glob.glob(sys.argv[1] + '/2*'))
vals = {}
for d in runs:
    df = results.load(d)
    df = df[(df.status=='ok') & (df.stop!='derived')]
    for r in df.to_dict('records'):
        if not set_by_host(r) or r['metric'] not in ('time',): continue
        s = np.array(r['samples'], float); p = np.array(r['sample_process'] if r['sample_process'] is not None and len(r['sample_process'])==len(s) else [0]*len(s))
        meds = [np.median(s[p==k]) for k in np.unique(p)]
        firsts = [np.median(s[p==k][:5]) for k in np.unique(p)]
        e = dict(median=np.median(s), q10=np.quantile(s,.1), best_proc=min(meds), mid_proc=np.median(meds), best_first5=min(firsts), q10_of_medians=np.quantile(meds, .1))
        vals.setdefault(r['suite']+' '+r['case'], []).append(e)
def spread(x): x=np.array(x); return (x.max()-x.min())/np.median(x)
keys = ['median','q10','best_proc','mid_proc','best_first5']
print('%-66s' % 'figure', ' '.join('%11s'%k for k in keys))
tot = {k: [] for k in keys}
for f, es in sorted(vals.items()):
    row = [spread([e[k] for e in es]) for k in keys]
    for k, v in zip(keys, row): tot[k].append(v)
    print('%-66s' % f[-66:], ' '.join('%10.1f%%' % (100*v) for v in row))
print('within 10%:', {k: int((np.array(v) <= .1).sum()) for k, v in tot.items()}, 'of', len(vals))
print('median spread:', {k: round(100*float(np.median(v)),1) for k, v in tot.items()})
