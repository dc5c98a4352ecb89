/** Job files whose bodies record their own side effects: test/harness/job-sources.mjs (shared with bench/). */
export { jobSource, type BodyEffect as Effect } from '../harness/job-sources.mjs';
