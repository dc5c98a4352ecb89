/** docs/reference/job-file.md: every field of a job definition, from its declaration in src/jobs/fields.ts. */
import { JOB_FIELDS } from '../../dist/jobs/fields.js';
import { EXTENSIONS } from '../../dist/jobs/load.js';
import { DATA_EXTENSIONS } from '../../dist/jobs/data-file.js';
import { code, page, table, text } from './markdown.mjs';

export const file = 'docs/reference/job-file.md';

const list = (items) => [...items].map(code).join(', ');

export function generate(fields = JOB_FIELDS) {
  const rows = Object.entries(fields).map(([name, spec]) => [
    code(name),
    text(spec.type),
    spec.default === undefined ? text(spec.defaultText ?? 'none') : code(spec.default),
    `${spec.commandJob ? 'command jobs only: ' : ''}${text(spec.description)}`,
  ]);
  const code_ = [...EXTENSIONS].filter((e) => !DATA_EXTENSIONS.has(e));
  return page('Job file', 'the job fields declared in `src/jobs/fields.ts`', [
    `A job file is a ${list(code_)} file directly in the jobs folder whose default export is an object with these fields (\`defineJob()\` only adds types), or a ${list(DATA_EXTENSIONS)} file defining a command job. Files whose name starts with \`_\` or \`.\` are ignored. Any other field is refused, naming the file and the field. Durations are a number of milliseconds or a string such as \`500ms\`, \`30s\`, \`10m\`, \`1h30m\`, \`1d\`.`,
    table(['field', 'type', 'default', 'meaning'], rows),
  ]);
}
