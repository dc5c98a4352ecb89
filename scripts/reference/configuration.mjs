/**
 * docs/reference/configuration.md: every setting (config-file key, environment variable, flag, type,
 * default, meaning) from its declaration in src/config/settings.ts; the flags from the commander program.
 */
import { buildProgram } from '../../dist/cli/main.js';
import { CONFIG_FILE, SETTINGS, defaultOf } from '../../dist/config/settings.js';
import { code, defaultCell, page, table, text } from './markdown.mjs';

export const file = 'docs/reference/configuration.md';

/** Where the flag is taken: every command, some (named), or none. */
function flagText(flag, program) {
  const commands = program.commands.filter((c) => c.name() !== 'help');
  const having = commands.filter((c) => c.options.some((o) => o.long === flag));
  if (having.length === 0) return 'none';
  const hidden = having.every((c) => c.options.find((o) => o.long === flag).hidden) ? ' (not in `--help`)' : '';
  const on = having.length === commands.length ? '' : ` (${having.map((c) => code(c.name())).join(', ')})`;
  return `${code(flag)}${on}${hidden}`;
}

export function generate(settings = SETTINGS, program = buildProgram()) {
  const rows = Object.entries(settings).map(([key, spec]) => [
    code(key), code(spec.env), flagText(spec.flag, program), text(spec.type), defaultCell(defaultOf(key, spec)), text(spec.description),
  ]);
  return page('Configuration', 'the settings declared in `src/config/settings.ts`', [
    `Precedence: built-in defaults < config file < environment < command-line flags. The config file is ${code(CONFIG_FILE.default)} when present, or the file named by ${code(CONFIG_FILE.flag)} or ${code(CONFIG_FILE.env)}: a JSON object whose keys are the first column (and \`comment\`, \`$schema\`, ignored). A bad value anywhere is refused at start with one line naming the setting as written (key, variable or flag), the value (secrets redacted) and what was expected, and exit status 2. Relative paths resolve against the working directory. Durations are a number of milliseconds or a string such as \`500ms\`, \`30s\`, \`10m\`, \`1h30m\`, \`1d\`.`,
    table(['key', 'variable', 'flag', 'type', 'default', 'meaning'], rows),
    'Logs are pino JSON lines, readable lines when stdout is a terminal (`SCHEDULER_LOG_FORMAT=json` forces JSON there too).',
  ]);
}
