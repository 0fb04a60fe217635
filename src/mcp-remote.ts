// The MCP server's push and pull (issue 24): an agent sends its history to the workspace's
// remote (S3) when its work is done, or brings in what another machine pushed. The S3 client
// is loaded only when one of them is called.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { z } from 'zod'
import type { Target } from './api.js'
import { BOUND, MAX_CHARS, answer, args, maxChars } from './mcp-answers.js'

const remoteLib = async () => await import('./remote-api.js')

export function registerRemoteTools (server: McpServer, target: Target): void {
  server.registerTool('push', {
    title: 'Push the history to a remote',
    description: `Send this workspace's history (every turn and branch) to its remote on S3-compatible storage (cpfs remote add), so that it outlives this machine: only what the remote lacks is sent, and the remote's ref changes last, all or nothing. Refused, changing nothing, when the remote has turns this workspace lacks (pull first). Answers {remote, url, turns, branches, upToDate, trees, chunks, bytes, storedBytes, requests}. ${BOUND}`,
    inputSchema: args('push', {
      remote: z.string().optional().describe('the remote\'s name (default: the only one)'),
      max_chars: maxChars
    }),
    annotations: { title: 'Push the history to a remote', readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true }
  }, async (a) => answer(a.max_chars ?? MAX_CHARS, async () => await (await remoteLib()).push(a.remote, target)))

  server.registerTool('pull', {
    title: 'Pull turns from a remote',
    description: `Bring the turns the remote has and this workspace lacks (pushed by another machine) into the history, every object checked first. They arrive as a branch; when this workspace has nothing of its own past the remote's turns, the head moves onto it (fastForward, moved). Otherwise nothing in the workspace changes: merge the branch. With full, a lazy clone also fetches the older turns' data it left on the remote. Answers {branch, layers, chunks, bytes, fastForward, moved, filled}. ${BOUND}`,
    inputSchema: args('pull', {
      remote: z.string().optional().describe('the remote\'s name (default: the only one)'),
      full: z.boolean().optional().describe('in a lazy clone, also fetch every older turn\'s data left on the remote, so the history no longer needs it'),
      max_chars: maxChars
    }),
    annotations: { title: 'Pull turns from a remote', readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true }
  }, async (a) => answer(a.max_chars ?? MAX_CHARS, async () => await (await remoteLib()).pull(a.remote, { ...target, full: a.full })))
}
