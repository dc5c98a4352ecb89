/**
 * docs/reference/cli.md: every command, argument, flag, default and exit status, walked from the
 * commander program (src/cli/), never from --help text.
 */
import { buildProgram } from '../../dist/cli/main.js';
import { GLOBAL_OPTIONS, commonOptions } from '../../dist/cli/common.js';
import { EXIT_MEANINGS, exitStatusesOf } from '../../dist/cli/exit.js';
import { CONFIG_FILE, SETTINGS, defaultOf } from '../../dist/config/settings.js';
import { code, defaultCell, page, table, text } from './markdown.mjs';

export const file = 'docs/reference/cli.md';

/** The program the page is made of (from dist/; a test changes a copy to see the page change). */
export { buildProgram };

/** The setting a flag sets (by its long name), if any. */
function settingOf(option) {
  const found = Object.entries(SETTINGS).find(([, spec]) => spec.flag === option.long);
  return found?.[0];
}

function argText(a) {
  const name = `${a.name()}${a.variadic ? '...' : ''}`;
  return a.required ? `<${name}>` : `[${name}]`;
}

function usage(cmd) {
  return [cmd.name(), ...cmd.registeredArguments.map(argText)].join(' ');
}

function defaultText(option) {
  if (option.defaultValue !== undefined) return code(option.defaultValue);
  const setting = settingOf(option);
  if (setting) return defaultCell(defaultOf(setting));
  if (option.long === CONFIG_FILE.flag) return `${code(CONFIG_FILE.default)} when present`;
  return '';
}

/** A setting's flag is described by the setting (the flag's help adds its variable and default). */
function meaning(option) {
  const setting = settingOf(option);
  if (setting) return `${text(SETTINGS[setting].description)} (setting ${code(setting)}, ${code(SETTINGS[setting].env)})`;
  if (option.long === CONFIG_FILE.flag) return `${text(CONFIG_FILE.description)} (${code(CONFIG_FILE.env)})`;
  return text(option.description);
}

function exits(cmd) {
  const statuses = exitStatusesOf(cmd);
  if (!statuses) throw new Error(`command '${cmd.name()}' declares no exit statuses (withExitStatuses in src/cli/)`);
  return Object.entries(statuses).map(([status, what]) => `${status}: ${text(what)}`).join('; ');
}

export function generate(program = buildProgram()) {
  const commands = program.commands.filter((c) => c.name() !== 'help');
  const commonLongs = new Set([...commonOptions(), ...program.options].map((o) => o.long));
  const common = [...commonOptions(), ...program.options.filter((o) => !commonOptions().some((c) => c.long === o.long))]
    .filter((o) => !o.hidden && o.long !== '--version');
  const before = new Set(program.options.filter((o) => GLOBAL_OPTIONS.includes(o.attributeName())).map((o) => o.long));

  const commandRows = commands.map((c) => [code(usage(c)), text(c.description()), exits(c)]);

  const flagRows = [];
  for (const c of commands) {
    for (const a of c.registeredArguments) {
      flagRows.push([code(c.name()), code(argText(a)), a.defaultValue === undefined ? '' : code(a.defaultValue), text(a.description)]);
    }
    for (const o of c.options) {
      if (o.hidden || commonLongs.has(o.long)) continue;
      flagRows.push([code(c.name()), code(o.flags), defaultText(o), meaning(o)]);
    }
  }

  const commonRows = common.map((o) => {
    const without = commands.filter((c) => !c.options.some((x) => x.long === o.long)).map((c) => c.name());
    const where = without.length === 0 ? 'every command' : `every command but ${without.map(code).join(', ')}`;
    return [code(o.flags), before.has(o.long) ? 'yes' : 'no', defaultText(o), `${meaning(o)}; ${where}`];
  });

  return page('Command line', 'the commander definitions in `src/cli/`', [
    `${code(`${program.name()} [common flags] <command> [arguments] [flags]`)}: ${text(program.description())} Every command takes \`--help\`; \`--version\` prints the version.`,
    '## Commands',
    table(['command', 'does', 'exit statuses'], commandRows),
    '## Arguments and flags of each command',
    table(['command', 'argument or flag', 'default', 'meaning'], flagRows),
    '## Common flags',
    'The flags marked "before" are taken before the command too (`scheduler --store <url> list`, as git and kubectl do). Given both before and after the command, the one after it wins. A flag overrides the environment variable and the config file (see [configuration](configuration.md)).',
    table(['flag', 'before', 'default', 'meaning'], commonRows),
    '## Exit statuses',
    table(['status', 'meaning'], Object.entries(EXIT_MEANINGS).map(([status, what]) => [code(status), text(what)])),
  ]);
}
