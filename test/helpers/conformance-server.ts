import { randomUUID } from 'node:crypto'
import type { ServerResponse } from 'node:http'
import {
  McpServer,
  ResourceTemplate,
  type ToolCallback,
} from '@modelcontextprotocol/sdk/server/mcp.js'
import {
  StreamableHTTPServerTransport,
  type EventStore,
} from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { toJsonSchemaCompat } from '@modelcontextprotocol/sdk/server/zod-json-schema-compat.js'
import {
  ElicitResultSchema,
  ListToolsRequestSchema,
  isInitializeRequest,
  type ElicitRequest,
  type JSONRPCMessage,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js'
import * as z from 'zod'
import { startRecording, type TestServer } from './sdk-servers.js'

/**
 * The server the MCP conformance suite's server scenarios (`@modelcontextprotocol/conformance`
 * 0.1.16, `conformance server --url`) are written against: the package ships no server, its
 * repository has `examples/servers/typescript/everything-server.ts` (tag v0.1.16), built with the
 * v1 SDK. This is that server, tool for tool, on the same SDK and transport (2025-era, stateful:
 * Mcp-Session-Id, GET stream, DELETE, an event store for SSE resumption), listening on
 * 127.0.0.1:0 with node:http instead of express. Names, texts and payloads are the suite's: its
 * checks compare them.
 */
export type ConformanceServer = Omit<TestServer, 'notify'>

// 1x1 red PNG and a minimal WAV, as in the reference server.
const IMAGE =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=='
const AUDIO = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA='
const LOCAL_HOSTNAMES = new Set(['localhost', '127.0.0.1', '[::1]'])

// SEP-1613: listed as written (tools/list must keep $schema, $defs and additionalProperties).
const JSON_SCHEMA_2020_12 = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: {
    address: {
      type: 'object',
      properties: { street: { type: 'string' }, city: { type: 'string' } },
    },
  },
  properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
  additionalProperties: false,
} as const

interface Session {
  readonly transport: StreamableHTTPServerTransport
  readonly server: McpServer
}

/** Starts the reference server; close() ends every session and socket. */
export async function startConformanceServer(): Promise<ConformanceServer> {
  const sessions = new Map<string, Session>()
  const events = memoryEventStore()
  const http = await startRecording(async (req, res, rec) => {
    // SECURITY: the reference server runs behind the SDK's createMcpExpressApp(), whose localhost
    // Host check (port-agnostic) is what the suite's dns-rebinding-protection scenario probes.
    if (!isLocalHost(rec.header('host'))) return sendError(res, 403, -32000, 'Invalid Host')
    const body = rec.body.length === 0 ? undefined : parseBody(rec.body)
    const sessionId = rec.header('mcp-session-id')
    const session = sessionId === undefined ? undefined : sessions.get(sessionId)
    if (session !== undefined) return session.transport.handleRequest(req, res, body)
    if (req.method !== 'POST' || sessionId !== undefined || !isInitializeRequest(body)) {
      return sendError(res, 400, -32000, 'Invalid or missing session ID')
    }
    // test_reconnection closes its own call's stream (called once the transport exists).
    const server = createReferenceServer((requestId) => transport.closeSSEStream(requestId))
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: events,
      // SEP-1699: the priming event's retry field, as the reference sets it.
      retryInterval: 5000,
      onsessioninitialized: (id) => void sessions.set(id, { transport, server }),
    })
    // A session ends (DELETE, or close()): its server goes with it, once.
    transport.onclose = () => {
      const id = transport.sessionId
      if (id !== undefined && sessions.delete(id)) void server.close()
    }
    await server.connect(transport)
    return transport.handleRequest(req, res, body)
  })
  return {
    ...http,
    async close() {
      await Promise.all([...sessions.values()].map(({ server }) => server.close()))
      await http.close()
    },
  }
}

function isLocalHost(host: string | undefined): boolean {
  if (host === undefined) return false
  try {
    return LOCAL_HOSTNAMES.has(new URL(`http://${host}`).hostname)
  } catch {
    return false
  }
}

function parseBody(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8')) as unknown
  } catch {
    return undefined
  }
}

function sendError(res: ServerResponse, status: number, code: number, message: string): void {
  res
    .writeHead(status, { 'content-type': 'application/json' })
    .end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code, message } }))
}

/** The reference's in-memory event store: ids `<stream>::<time>_<uuid>`, replayed in id order. */
function memoryEventStore(): EventStore {
  const stored = new Map<string, { streamId: string; message: JSONRPCMessage }>()
  return {
    storeEvent(streamId, message) {
      const eventId = `${streamId}::${Date.now()}_${randomUUID()}`
      stored.set(eventId, { streamId, message })
      return Promise.resolve(eventId)
    },
    async replayEventsAfter(lastEventId, { send }) {
      const streamId = lastEventId.split('::')[0] ?? ''
      const after = [...stored.entries()]
        .filter(([id, e]) => e.streamId === streamId && id > lastEventId)
        .sort(([a], [b]) => a.localeCompare(b))
      for (const [id, { message }] of after) {
        if (Object.keys(message).length > 0) await send(id, message)
      }
      return streamId
    },
  }
}

type Shape = z.ZodRawShape
type Content = { content: { type: 'text'; text: string }[] }

/** One server per session, as the reference builds it. */
function createReferenceServer(closeStream: (requestId: string | number) => void): McpServer {
  const mcp = new McpServer(
    { name: 'mcp-conformance-test-server', version: '1.0.0' },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {},
      },
    },
  )
  // tools/list is answered from this table (the reference overrides the SDK's list the same way)
  // so that json_schema_2020_12_tool is listed with its raw JSON Schema.
  const listed: Tool[] = []
  const tool = <S extends Shape>(
    name: string,
    description: string,
    shape: S,
    run: ToolCallback<S>,
    listedSchema?: Tool['inputSchema'],
  ): void => {
    mcp.registerTool(name, { description, inputSchema: shape }, run)
    const inputSchema = listedSchema ?? (toJsonSchemaCompat(z.object(shape)) as Tool['inputSchema'])
    listed.push({ name, description, inputSchema })
  }
  const text = (t: string): Content => ({ content: [{ type: 'text', text: t }] })
  const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))
  const elicit = async (
    params: ElicitRequest['params'],
    say: (action: string, content: string) => string,
  ): Promise<Content> => {
    try {
      const r = await mcp.server.request(
        { method: 'elicitation/create', params },
        ElicitResultSchema,
      )
      return text(say(r.action, JSON.stringify(r.content ?? {})))
    } catch (error) {
      return text(`Elicitation not supported or error: ${(error as Error).message}`)
    }
  }

  tool('test_simple_text', 'Tests simple text content response', {}, () =>
    text('This is a simple text response for testing.'),
  )
  tool('test_image_content', 'Tests image content response', {}, () => ({
    content: [{ type: 'image', data: IMAGE, mimeType: 'image/png' }],
  }))
  tool('test_audio_content', 'Tests audio content response', {}, () => ({
    content: [{ type: 'audio', data: AUDIO, mimeType: 'audio/wav' }],
  }))
  tool('test_embedded_resource', 'Tests embedded resource content response', {}, () => ({
    content: [
      {
        type: 'resource',
        resource: {
          uri: 'test://embedded-resource',
          mimeType: 'text/plain',
          text: 'This is an embedded resource content.',
        },
      },
    ],
  }))
  tool(
    'test_multiple_content_types',
    'Tests response with multiple content types (text, image, resource)',
    {},
    () => ({
      content: [
        { type: 'text', text: 'Multiple content types test:' },
        { type: 'image', data: IMAGE, mimeType: 'image/png' },
        {
          type: 'resource',
          resource: {
            uri: 'test://mixed-content-resource',
            mimeType: 'application/json',
            text: JSON.stringify({ test: 'data', value: 123 }),
          },
        },
      ],
    }),
  )
  tool(
    'test_tool_with_logging',
    'Tests tool that emits log messages during execution',
    {},
    async (_args, { sendNotification }) => {
      for (const [i, data] of [
        'Tool execution started',
        'Tool processing data',
        'Tool execution completed',
      ].entries()) {
        if (i > 0) await sleep(50)
        await sendNotification({ method: 'notifications/message', params: { level: 'info', data } })
      }
      return text('Tool with logging executed successfully')
    },
  )
  tool(
    'test_tool_with_progress',
    'Tests tool that reports progress notifications',
    {},
    async (_args, { sendNotification, _meta }) => {
      const progressToken = _meta?.progressToken ?? 0
      for (const progress of [0, 50, 100]) {
        if (progress > 0) await sleep(50)
        await sendNotification({
          method: 'notifications/progress',
          params: {
            progressToken,
            progress,
            total: 100,
            message: `Completed step ${progress} of 100`,
          },
        })
      }
      return text(String(progressToken))
    },
  )
  tool('test_error_handling', 'Tests error response handling', {}, () => {
    throw new Error('This tool intentionally returns an error for testing')
  })
  // SEP-1699: closes the call's SSE stream, then answers after the client has reconnected.
  tool(
    'test_reconnection',
    'Tests SSE stream disconnection and client reconnection (SEP-1699). Server will close the stream mid-call and send the result after client reconnects.',
    {},
    async (_args, { requestId }) => {
      closeStream(requestId)
      await sleep(100)
      return text(
        'Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure.',
      )
    },
  )
  tool(
    'test_sampling',
    'Tests server-initiated sampling (LLM completion request)',
    { prompt: z.string().describe('The prompt to send to the LLM') },
    async ({ prompt }) => {
      try {
        const r = await mcp.server.createMessage({
          messages: [{ role: 'user', content: { type: 'text', text: prompt } }],
          maxTokens: 100,
        })
        const content = Array.isArray(r.content) ? r.content[0] : r.content
        return text(`LLM response: ${content?.type === 'text' ? content.text : 'No response'}`)
      } catch (error) {
        return text(`Sampling not supported or error: ${(error as Error).message}`)
      }
    },
  )
  tool(
    'test_elicitation',
    'Tests server-initiated elicitation (user input request)',
    { message: z.string().describe('The message to show the user') },
    ({ message }) =>
      elicit(
        {
          message,
          requestedSchema: {
            type: 'object',
            properties: { response: { type: 'string', description: "User's response" } },
            required: ['response'],
          },
        },
        (action, content) => `User response: action=${action}, content=${content}`,
      ),
  )
  tool(
    'test_elicitation_sep1034_defaults',
    'Tests elicitation with default values per SEP-1034',
    {},
    () =>
      elicit(
        {
          message: 'Please review and update the form fields with defaults',
          requestedSchema: {
            type: 'object',
            properties: {
              name: { type: 'string', description: 'User name', default: 'John Doe' },
              age: { type: 'integer', description: 'User age', default: 30 },
              score: { type: 'number', description: 'User score', default: 95.5 },
              status: {
                type: 'string',
                description: 'User status',
                enum: ['active', 'inactive', 'pending'],
                default: 'active',
              },
              verified: { type: 'boolean', description: 'Verification status', default: true },
            },
            required: [],
          },
        },
        (action, content) => `Elicitation completed: action=${action}, content=${content}`,
      ),
  )
  tool(
    'test_elicitation_sep1330_enums',
    'Tests elicitation with enum schema improvements per SEP-1330',
    {},
    () =>
      elicit(
        {
          message: 'Please select options from the enum fields',
          requestedSchema: {
            type: 'object',
            properties: {
              untitledSingle: {
                type: 'string',
                description: 'Select one option',
                enum: ['option1', 'option2', 'option3'],
              },
              titledSingle: {
                type: 'string',
                description: 'Select one option with titles',
                oneOf: [
                  { const: 'value1', title: 'First Option' },
                  { const: 'value2', title: 'Second Option' },
                  { const: 'value3', title: 'Third Option' },
                ],
              },
              legacyEnum: {
                type: 'string',
                description: 'Select one option (legacy)',
                enum: ['opt1', 'opt2', 'opt3'],
                enumNames: ['Option One', 'Option Two', 'Option Three'],
              },
              untitledMulti: {
                type: 'array',
                description: 'Select multiple options',
                minItems: 1,
                maxItems: 3,
                items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
              },
              titledMulti: {
                type: 'array',
                description: 'Select multiple options with titles',
                minItems: 1,
                maxItems: 3,
                items: {
                  anyOf: [
                    { const: 'value1', title: 'First Choice' },
                    { const: 'value2', title: 'Second Choice' },
                    { const: 'value3', title: 'Third Choice' },
                  ],
                },
              },
            },
            required: [],
          },
        },
        (action, content) => `Elicitation completed: action=${action}, content=${content}`,
      ),
  )
  tool(
    'json_schema_2020_12_tool',
    'Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)',
    {
      name: z.string().optional(),
      address: z.object({ street: z.string().optional(), city: z.string().optional() }).optional(),
    },
    (args) => text(`JSON Schema 2020-12 tool called with: ${JSON.stringify(args)}`),
    JSON_SCHEMA_2020_12,
  )
  mcp.server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: listed }))

  registerResources(mcp)
  registerPrompts(mcp)
  return mcp
}

function registerResources(mcp: McpServer): void {
  const log = (data: string): void =>
    void mcp.server
      .sendLoggingMessage({ level: 'info', logger: 'conformance-test-server', data })
      .catch(() => undefined)
  const plain = (uri: string, text: string) => ({
    contents: [{ uri, mimeType: 'text/plain', text }],
  })
  mcp.registerResource(
    'static-text',
    'test://static-text',
    {
      title: 'Static Text Resource',
      description: 'A static text resource for testing',
      mimeType: 'text/plain',
    },
    () => plain('test://static-text', 'This is the content of the static text resource.'),
  )
  mcp.registerResource(
    'static-binary',
    'test://static-binary',
    {
      title: 'Static Binary Resource',
      description: 'A static binary resource (image) for testing',
      mimeType: 'image/png',
    },
    () => ({ contents: [{ uri: 'test://static-binary', mimeType: 'image/png', blob: IMAGE }] }),
  )
  mcp.registerResource(
    'template',
    new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    {
      title: 'Resource Template',
      description: 'A resource template with parameter substitution',
      mimeType: 'application/json',
    },
    (uri, { id }) => ({
      contents: [
        {
          uri: uri.toString(),
          mimeType: 'application/json',
          text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${String(id)}` }),
        },
      ],
    }),
  )
  mcp.registerResource(
    'watched-resource',
    'test://watched-resource',
    {
      title: 'Watched Resource',
      description: 'A resource that auto-updates every 3 seconds',
      mimeType: 'text/plain',
    },
    () => plain('test://watched-resource', 'Watched resource content'),
  )
  const subscriptions = new Set<string>()
  mcp.server.setRequestHandler(
    z.object({ method: z.literal('resources/subscribe'), params: z.object({ uri: z.string() }) }),
    ({ params: { uri } }) => {
      subscriptions.add(uri)
      log(`Subscribed to resource: ${uri}`)
      return {}
    },
  )
  mcp.server.setRequestHandler(
    z.object({ method: z.literal('resources/unsubscribe'), params: z.object({ uri: z.string() }) }),
    ({ params: { uri } }) => {
      subscriptions.delete(uri)
      log(`Unsubscribed from resource: ${uri}`)
      return {}
    },
  )
  mcp.server.setRequestHandler(
    z.object({ method: z.literal('logging/setLevel'), params: z.object({ level: z.string() }) }),
    ({ params: { level } }) => {
      log(`Log level set to: ${level}`)
      return {}
    },
  )
  // The reference answers every completion with an empty list.
  mcp.server.setRequestHandler(z.object({ method: z.literal('completion/complete') }), () => ({
    completion: { values: [], total: 0, hasMore: false },
  }))
}

function registerPrompts(mcp: McpServer): void {
  mcp.registerPrompt(
    'test_simple_prompt',
    { title: 'Simple Test Prompt', description: 'A simple prompt without arguments' },
    () => ({
      messages: [
        {
          role: 'user',
          content: { type: 'text', text: 'This is a simple prompt for testing.' },
        },
      ],
    }),
  )
  mcp.registerPrompt(
    'test_prompt_with_arguments',
    {
      title: 'Prompt With Arguments',
      description: 'A prompt with required arguments',
      argsSchema: {
        arg1: z.string().describe('First test argument'),
        arg2: z.string().describe('Second test argument'),
      },
    },
    ({ arg1, arg2 }) => ({
      messages: [
        {
          role: 'user',
          content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` },
        },
      ],
    }),
  )
  mcp.registerPrompt(
    'test_prompt_with_embedded_resource',
    {
      title: 'Prompt With Embedded Resource',
      description: 'A prompt that includes an embedded resource',
      argsSchema: { resourceUri: z.string().describe('URI of the resource to embed') },
    },
    ({ resourceUri }) => ({
      messages: [
        {
          role: 'user',
          content: {
            type: 'resource',
            resource: {
              uri: resourceUri,
              mimeType: 'text/plain',
              text: 'Embedded resource content for testing.',
            },
          },
        },
        {
          role: 'user',
          content: { type: 'text', text: 'Please process the embedded resource above.' },
        },
      ],
    }),
  )
  mcp.registerPrompt(
    'test_prompt_with_image',
    { title: 'Prompt With Image', description: 'A prompt that includes image content' },
    () => ({
      messages: [
        { role: 'user', content: { type: 'image', data: IMAGE, mimeType: 'image/png' } },
        { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
      ],
    }),
  )
}
