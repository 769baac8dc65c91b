BUNDLE=gpu-bundle-dz WORKLOAD=W4 PRECISION=bf16 POLICY=own SKIP=3000 COUNT=400 STEPS=60 scripts/gpu/visit.sh ncu-step
