export type Command = {
  name?: string;
  role?: string;
  command?: string;
  argv?: string[];
  exit_code?: number | null;
  started_at?: string;
  ended_at?: string;
};

/** A command line as a shell would take it back (each argument quoted when it needs it). */
export function shellLine(command: Command): string {
  if (!command.argv) return command.command ?? "";
  return command.argv
    .map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`))
    .join(" ");
}
