import type { Command } from 'commander';
import { redactUrl } from '../config/redact.js';
import { openStore } from './lazy.js';
import { withExitStatuses } from './exit.js';
import { print, setup, withCommonOptions, type CommonOptions } from './common.js';

export function migrateCommand(program: Command): void {
  withExitStatuses(withCommonOptions(program.command('migrate')), { 0: 'the tables are up to date', 2: 'bad usage or setting', 4: 'store unreachable, or it refuses the store user a privilege the migrations need' })
    .description('create or upgrade the tables (run and run-once also do this at start)')
    .action(async (options: CommonOptions) => {
      const { config } = await setup(options);
      const store = await openStore(config);
      await store.close();
      const shown = redactUrl(config.store.url);
      print(options.json, { migrated: true, store: shown }, () => `store ${shown} is up to date`);
    });
}
