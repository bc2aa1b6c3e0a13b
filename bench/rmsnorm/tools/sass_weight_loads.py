# Lists, per kernel of `cuobjdump --dump-sass LIB > F.sass`, the weight loads (LDG...CONSTANT) that
# ptxas placed after the first shuffle/barrier (late) and 4-byte global stores (split):
#   python3 sass_weight_loads.py F.sass [all]   (NOTES v7/v8)
import re,subprocess,sys
def funcs(path):
    out={};cur=None
    for line in open(path):
        m=re.match(r'\s+Function : (\S+)',line)
        if m: cur=m.group(1); out[cur]=[]; continue
        if cur: out[cur].append(line)
    return out
f=funcs(sys.argv[1])
for n,lines in f.items():
    if 'loop' in n: continue
    ins=[re.search(r'/\*[0-9a-f]{4}\*/\s+(.*?);',l).group(1) for l in lines if re.search(r'/\*[0-9a-f]{4}\*/\s+(.*?);',l)]
    first_shfl=next((i for i,x in enumerate(ins) if 'SHFL' in x or 'BAR.SYNC' in x),None)
    if first_shfl is None: continue
    late=sum(1 for x in ins[first_shfl:] if 'LDG' in x and 'CONSTANT' in x)
    early=sum(1 for x in ins[:first_shfl] if 'LDG' in x and 'CONSTANT' in x)
    split=sum(1 for x in ins if re.match(r'(@!?P\d )?STG\.E(\.U16)? ',x))
    dn=subprocess.run(['c++filt',n],capture_output=True,text=True).stdout.strip()
    dn=re.sub(r'\(.*','',dn.replace('(anonymous namespace)::','').replace('void ',''))
    if late or split or (len(sys.argv)>2): print(f"w early {early} late {late} split-stores {split}  {dn}")
