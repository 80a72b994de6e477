// Type-checked by test/types.test.mjs (never run): the ES module face of the types.
import Anthropic from '@anthropic-ai/sdk';
import { betaMemoryTool } from '@anthropic-ai/sdk/helpers/beta/memory';
import { MnemoClient, SettingsRefused, MnemoError, type LogEntry } from 'mnemo-db';

const mnemo = await MnemoClient.open('memory.mnemo.db', { agent: 'agent-1' });
const tool = betaMemoryTool(mnemo.memoryTool());
const final = await new Anthropic().beta.messages.toolRunner({
  model: 'claude-opus-4-8', max_tokens: 1024, tools: [tool],
  messages: [{ role: 'user', content: 'I prefer tea.' }],
});
const log: LogEntry[] = await mnemo.log({ agent: 'agent-1' });
const r = await mnemo.call({ command: 'view', path: '/memories' });
const c: string = r.content;
try { await mnemo.head(); } catch (e) { if (e instanceof SettingsRefused) { const s: number | undefined = e.status; } }
const err: MnemoError = new SettingsRefused('x');
console.log(final.content, log.length, c, err, (await mnemo.verify()).status, (await mnemo.tokens.create({ agent: 'a' })).token);
mnemo.close();
