export { createPageHandler, DEFAULT_REFRESH_SECONDS, type PageHook, type PageOptions, type PageResponse } from './handler.js';
export { escapeHtml } from './html.js';
export { JOB_FILTERS, matchesFilter, type JobFilter } from './render.js';
