// Type-checked by test/types.test.mjs (never run): the CommonJS face of the types.
import mnemo = require('mnemo-db');
const client = mnemo.MnemoClient.connect('http://127.0.0.1:1', { token: 't' });
const handlers = client.memoryTool({ profile: 'typescript-sdk' });
handlers.view({ command: 'view', path: '/memories' }).then((s: string) => s.length);
