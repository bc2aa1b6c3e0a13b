# Per-kernel comparison of the cubins inside two objects' .nv_fatbin sections (no cuobjdump on
# this machine): the bytes of each kernel's .text.<kernel> section (its SASS), per ELF (arch),
# plus registers / spills from the -Xptxas -v logs.
import re, struct, sys
def elfs(path):
    d = open(path, 'rb').read(); out = {}; i = 0
    while True:
        i = d.find(b'\x7fELF', i)
        if i < 0: break
        e = d[i:]
        shoff, = struct.unpack_from('<Q', e, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from('<HHH', e, 0x3A)
        flags, = struct.unpack_from('<I', e, 0x30)
        secs = []
        for k in range(shnum):
            nm, ty, fl, ad, off, sz = struct.unpack_from('<IIQQQQ', e, shoff + k * shentsize)
            secs.append((nm, off, sz))
        stro = secs[shstrndx][1]
        def name(n): return e[stro + n:e.index(b'\0', stro + n)].decode()
        arch = 'sm_%d' % (flags & 0xff) if (flags & 0xff) else 'sm_%d' % ((flags >> 8) & 0xff)
        texts = {}
        for nm, off, sz in secs:
            n = name(nm)
            if n.startswith('.text.'): texts[n[6:]] = e[off:off + sz]
        out[len(out)] = texts; i += 4
    return out
def regs(log):
    r = {}; fn = None
    for line in open(log):
        m = re.search(r"Compiling entry function '(\S+)' for '(\S+)'", line)
        if m: fn = (m.group(2), m.group(1)); continue
        m = re.search(r'Used (\d+) registers', line)
        if m and fn: r[fn] = m.group(1)
        m = re.search(r'(\d+) bytes spill stores, (\d+) bytes spill loads', line)
        if m and fn: r[fn + ('s',)] = m.group(1) + '/' + m.group(2)
    return r
same = diff = 0
for tu in ('decode_kernel', 'decode_fp8'):
    A, B = elfs(f'base/{tu}.fatbin'), elfs(f'new/{tu}.fatbin')
    ra, rb = regs(f'base/{tu}.log'), regs(f'new/{tu}.log')
    print(f'== {tu}.cu')
    for idx in sorted(A):
        a, b = A[idx], B[idx]
        # which arch: the kernels with the TMA path (KV=2) trap on sm_80, so its text is tiny there
        for k in sorted(set(a) | set(b)):
            ia, ib = a.get(k, b''), b.get(k, b'')
            ok = ia == ib; same += ok; diff += not ok
            arch = [x for x in ('sm_80', 'sm_90a') if (x, k) in ra]
            ar = 'sm_90a' if idx == 0 else 'sm_80'
            rg = f"regs {ra.get((ar,k))}->{rb.get((ar,k))} spill {ra.get((ar,k,'s'))}->{rb.get((ar,k,'s'))}"
            print(f"elf{idx} {'identical' if ok else 'DIFFERS  '} {len(ia)//16:5}->{len(ib)//16:5} insts  {rg}  {k}")
print(f'TOTAL kernels identical {same}, differing {diff}')
print('differing 16-byte instruction words per kernel (same-size kernels show reordering/renaming):')
for tu in ('decode_kernel', 'decode_fp8'):
    A, B = elfs(f'base/{tu}.fatbin'), elfs(f'new/{tu}.fatbin')
    for idx in sorted(A):
        for k in sorted(A[idx]):
            ia, ib = A[idx][k], B[idx].get(k, b'')
            if ia != ib:
                n = sum(ia[i:i+16] != ib[i:i+16] for i in range(0, min(len(ia), len(ib)), 16))
                print(f'  elf{idx} {n:5}/{len(ia)//16:5} words differ  {k}')
