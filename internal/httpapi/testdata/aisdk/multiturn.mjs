// The AI SDK's default multi-turn chat against the gateway: generateText,
// then the response's messages passed back with a new user message (with
// store on, the default, the SDK sends the earlier assistant turn as an
// item_reference). Prints one JSON line with both answers.
import { createOpenAI } from '@ai-sdk/openai';
import { generateText } from 'ai';

const openai = createOpenAI({ baseURL: process.env.CUBICLE_URL + '/v1', apiKey: process.env.CUBICLE_KEY });
const model = openai('m');
const messages = [{ role: 'user', content: 'Hi' }];
const first = await generateText({ model, messages });
messages.push(...first.response.messages, { role: 'user', content: 'Again' });
const second = await generateText({ model, messages });
console.log(JSON.stringify({ first: first.text, second: second.text, sent: second.request.body }));
