//! Live updates: one `EventSource` on `/api/v1/stream` per tab bumps a tick that the pages'
//! resources depend on, so they refetch within a second of a change. The browser reconnects
//! by itself when the connection drops; the badge says so meanwhile, and the `change` sent
//! on reconnect makes every page catch up.

use chrono::{DateTime, Utc};
use leptos::prelude::*;

/// Shared by every page through context.
#[derive(Debug, Clone, Copy)]
pub struct Live {
    /// Bumped on every change the server reports.
    pub tick: RwSignal<u64>,
    /// Whether the stream is open right now.
    pub connected: RwSignal<bool>,
    /// The viewer's clock, ticking every second (for waiting times and runtimes).
    pub now: RwSignal<DateTime<Utc>>,
}

/// Creates the live context and, in the browser, opens the stream and starts the clock.
pub fn provide_live() -> Live {
    let live = Live { tick: RwSignal::new(0), connected: RwSignal::new(false), now: RwSignal::new(Utc::now()) };
    provide_context(live);
    // Nobody signed in (the sign-in page): the stream would only be refused.
    #[cfg(feature = "hydrate")]
    if super::session::me().is_some() {
        Effect::new(move |_| browser::connect(live));
    }
    live
}

/// The live context (the root component provides it).
pub fn use_live() -> Live {
    use_context::<Live>().unwrap_or_else(provide_live)
}

/// "Live" or "Reconnecting…", for page headers.
#[component]
pub fn LiveBadge() -> impl IntoView {
    let live = use_live();
    view! {
        <span class="live-badge" class:on=move || live.connected.get() data-testid="live" role="status"
            title="Pages update by themselves while this is on">
            <span class="dot" aria-hidden="true"></span>
            {move || if live.connected.get() { "Live" } else { "Reconnecting…" }}
        </span>
    }
}

#[cfg(feature = "hydrate")]
mod browser {
    use chrono::Utc;
    use leptos::prelude::*;
    use wasm_bindgen::prelude::*;
    use wasm_bindgen::JsCast;
    use web_sys::EventSource;

    use super::Live;

    pub fn connect(live: Live) {
        let Ok(source) = EventSource::new("/api/v1/stream") else {
            return;
        };
        let on_change = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |_| {
            live.connected.set(true);
            live.tick.update(|t| *t += 1);
        });
        let _ = source.add_event_listener_with_callback("change", on_change.as_ref().unchecked_ref());
        on_change.forget();
        let on_open = Closure::<dyn FnMut()>::new(move || live.connected.set(true));
        source.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        on_open.forget();
        let on_error = Closure::<dyn FnMut()>::new(move || live.connected.set(false));
        source.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        on_error.forget();
        // The stream lives as long as the tab.
        std::mem::forget(source);

        let clock = Closure::<dyn FnMut()>::new(move || live.now.set(Utc::now()));
        if let Some(w) = web_sys::window() {
            let _ = w.set_interval_with_callback_and_timeout_and_arguments_0(clock.as_ref().unchecked_ref(), 1000);
            let resize = Closure::<dyn FnMut()>::new(super::super::chart::resize_all);
            let _ = w.add_event_listener_with_callback("resize", resize.as_ref().unchecked_ref());
            resize.forget();
        }
        clock.forget();
    }
}
