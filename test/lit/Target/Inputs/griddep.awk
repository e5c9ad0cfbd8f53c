# Counts, over a PTX file: kernel entries, griddepcontrol waits and
# launch_dependents, and global memory accesses (loads, stores, atomics,
# async copies) that come before their kernel's wait.
/^\.visible \.entry/ { kernels++; waited = 0 }
/griddepcontrol\.wait;/ { waits++; waited = 1 }
/griddepcontrol\.launch_dependents;/ { launches++ }
/(ld|st|atom|red)\.global|cp\.async/ { if (!waited) early++ }
END {
  printf "kernels %d waits %d launches %d early-accesses %d\n", kernels,
         waits, launches, early
}
