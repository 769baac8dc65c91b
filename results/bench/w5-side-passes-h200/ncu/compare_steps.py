import csv,gzip,re,collections,sys
def load(p):
    lines=gzip.open(p,'rt').read().splitlines()
    i=[k for k,l in enumerate(lines) if l.startswith('"ID"')][0]
    rows=list(csv.DictReader(lines[i:]))
    ks=[(int(r['ID']),r['Kernel Name'],r['Grid Size'],float(r['Metric Value'].replace(',',''))/1000) for r in rows]
    adam=[k for k in ks if 'adam_k' in k[1]]
    # step: from after a D adam (grid 2701) ... to G adam (3493) : take last G adam and the G adam before it
    g=[k[0] for k in adam if k[2].startswith('(3493')]
    a,b=g[-2],g[-1]
    return [k for k in ks if a<k[0]<=b]
def agg(step):
    c=collections.Counter(); n=collections.Counter()
    for k in step:
        nm=re.sub(r'cuda::<unnamed>::|pdnn::|kit::<unnamed>::','',k[1].replace('void ','')); nm=re.sub(r'[<(].*','',nm)
        c[nm]+=k[3]; n[nm]+=1
    return c,n
A=load(sys.argv[1]); B=load(sys.argv[2])
ca,na=agg(A); cb,nb=agg(B)
print(f"total {sum(k[3] for k in A):.1f} ({len(A)} kernels) -> {sum(k[3] for k in B):.1f} ({len(B)})")
for x in sorted(set(ca)|set(cb), key=lambda x:-(ca[x]+cb[x])):
    if ca[x]+cb[x] > 5: print(f"{ca[x]:8.1f} ({na[x]:2d}) -> {cb[x]:8.1f} ({nb[x]:2d})  {x}")
