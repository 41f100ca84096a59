/**
 * The help texts of `mcp-edge` and each of its commands. This module imports nothing: `mcp-edge
 * --help` and `mcp-edge <command> --help` load it alone and print before anything of the gateway
 * is read (src/cli.ts).
 */

/** The commands, in the order the global help lists them. */
export const COMMANDS = ['serve', 'check', 'explain', 'pin', 'tokens', 'schema'] as const
export type Command = (typeof COMMANDS)[number]

export function isCommand(name: string): name is Command {
  return (COMMANDS as readonly string[]).includes(name)
}

export const USAGE = `usage: mcp-edge <command> [options]

commands:
  serve    --config FILE           run the gateway
  check    --config FILE           validate a config and its policy files and lock; exit 1
                                   listing every problem with its file, line and column
  explain  --config FILE --server NAME
           (--tool NAME | --prompt NAME | --resource URI | --skill URI | --method NAME)
           [--claims JSON] [--args JSON] [--scopes "A B"] [--json]
                                   the decision for a caller and the rule that made it;
                                   exit 0 allow, 3 deny
  pin      --config FILE [--lock PATH] [--server NAME]... [--check]
                                   write every server's tool and prompt digests to the lock
                                   file; --check compares: exit 0 clean, 1 drift, 2 error
  tokens   (list | revoke) --config FILE [--subject SUB] [--server NAME] [--all] [--json]
                                   users connected to userAuth servers (shared store);
                                   revoke removes them, revoking at the service (RFC 7009)
  schema   (config | policy) [--write]
                                   the JSON Schema of a config or policy file, for editors
  help [COMMAND]                   this text, or one command's options

mcp-edge <command> --help (or -h) prints that command's options and exit codes.
Docs: README.md "Configuration reference", docs/operations.md.
`

const SERVE_USAGE = `usage: mcp-edge serve --config FILE
  Runs the gateway: the data plane on listen:, the status page and /metrics on admin:. The config
  and policy files are watched and reloaded when they change (SIGHUP reloads at once); a broken
  edit is refused and the running config stays. SIGTERM or SIGINT drains, then exits.
  --config, -c  the gateway's YAML config (README.md "Configuration reference")
  exit codes: 0 drained and stopped, 1 invalid config or a failed start or drain, 2 usage
`

const CHECK_USAGE = `usage: mcp-edge check --config FILE
  Validates the config, the policy files it names and the pinning lock, as serve would load
  them, and prints one line of what is configured. Every problem is listed with its file, line
  and column and the lines around it.
  --config, -c  the gateway's YAML config
  exit codes: 0 valid, 1 problems, 2 usage
`

export const EXPLAIN_USAGE = `usage: mcp-edge explain --config FILE --server NAME
                        (--tool NAME | --prompt NAME | --resource URI | --skill URI |
                         --method NAME)
                        [--claims JSON] [--args JSON] [--scopes "A B"] [--json]
  Prints the policy decision for a caller and the rule that made it. NAME may be a virtual
  server: the member a (prefixed) name leads to decides, under its own rules.
  --config, -c  the gateway's YAML config
  --server      a server or virtual server of the config
  --tool, --prompt, --resource, --skill, --method
                the target, exactly one: a tool or prompt name (as clients see it), a resource
                URI, a skill by its SKILL.md URI, or a method that names no target (tools/list,
                a vendor method)
  --claims      the caller's verified JWT claims, e.g. '{"sub":"alice","groups":["eng"]}'
                (omitted: an anonymous caller, which rules with \`when\` never match)
  --args        the call's arguments, for rules with \`if\` or \`unless\`, e.g. '{"database":"sales"}'
                (omitted: no arguments; completion/complete's are '{"name":…,"value":…}')
  --scopes      the token's scopes, space-separated: checked against requiredScopes and the
                server's \`scopes:\` before policy; a missing one is a 403 (omitted: the \`scope\` /
                \`scp\` claim of --claims, as the gateway reads the token; no --claims: not checked)
  --json        one JSON object instead of text
  exit codes: 0 allowed (also "would deny" in dry run), 3 denied, 1 invalid config, 2 usage
`

export const PIN_USAGE = `usage: mcp-edge pin --config FILE [--lock PATH] [--server NAME]... [--check]
  Asks every configured server (not virtual servers) for its instructions, tools and prompts,
  through the gateway's upstream settings and credentials, and writes their digests and text to
  the lock (default: pinning.lockFile, else catalog.lock.yaml beside the config).
  --config, -c  the gateway's YAML config
  --lock        the lock file (relative to where the command runs)
  --server      only this server (repeatable); the lock keeps the others as they were
  --check       compare instead of writing: exit 0 when nothing drifted, 1 with a diff per
                changed, added or removed definition
  exit codes: 0 ok, 1 drift (--check), 2 usage, config or connection error (nothing written)
`

const TOKENS_USAGE = `usage: mcp-edge tokens list --config FILE [--subject SUB] [--server NAME] [--json]
       mcp-edge tokens revoke --config FILE (--subject SUB | --server NAME | --all)
  The users connected to servers with userAuth, read from the userTokens store (Redis; with the
  in-memory store the tokens live in the running gateway, whose status page lists them). Never
  prints a token. revoke removes the matching users' tokens and revokes them at the service's
  authorization server where it has an RFC 7009 endpoint; its audit lines go to stderr.
  --config, -c  the gateway's YAML config
  --subject     only this user (the \`sub\` of their token at the gateway)
  --server      only this server
  --all         revoke every connection
  --json        list as one JSON array
  exit codes: 0 done, 1 invalid config, no userTokens, or the store does not answer, 2 usage
`

const SCHEMA_USAGE = `usage: mcp-edge schema (config | policy) [--write]
  Prints the JSON Schema (draft 2020-12) of a gateway config or a policy file, generated from
  the schema that validates them, for editors (yaml-language-server).
  --write       rewrite the shipped copy instead (deploy/gateway.schema.json, policies/schema.json)
  exit codes: 0 printed or written, 2 usage
`

/** Each command's own help. */
export const COMMAND_USAGE: Readonly<Record<Command, string>> = {
  serve: SERVE_USAGE,
  check: CHECK_USAGE,
  explain: EXPLAIN_USAGE,
  pin: PIN_USAGE,
  tokens: TOKENS_USAGE,
  schema: SCHEMA_USAGE,
}
