import { register } from 'node:module';

/** `node --import` this file: mysql2 cannot be loaded in the process (see block-mysql2.hooks.ts). */
register('./block-mysql2.hooks.js', import.meta.url);
