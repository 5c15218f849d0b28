// The template path's sweep, shard 3 of 3 (test/fidelity/template-sweep.ts).
import { sweepShard } from '../../fidelity/template-sweep';

sweepShard(2, 3);
