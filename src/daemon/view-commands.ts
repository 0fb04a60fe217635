// The control commands of views (view-mounts.ts): open one, close one or all, list them.
import type { Handlers } from '../control/protocol.js'
import type { ViewMounts } from './view-mounts.js'

export function viewHandlers (views: ViewMounts): Pick<Handlers, 'view-open' | 'view-close' | 'views'> {
  return {
    'view-open': async (a) => await views.open(String(a.turn), a.path, Boolean(a.end)),
    'view-close': async (a) => await views.close(a?.path, Boolean(a?.lazy)),
    views: () => views.list()
  }
}
