//! The module API's function pointers, and the check that the server has every one this layer
//! calls.

/// A raw API function pointer, for use inside `unsafe`: the pointers are written once by
/// `RedisModule_Init`, before any command runs. `on_load` refuses to load the module unless every
/// pointer in `first_missing` was resolved, so the `expect` cannot fire on a server that loaded us.
macro_rules! api {
    ($name:ident) => {
        ::redis_module::raw::$name.expect(concat!("Redis module API without ", stringify!($name)))
    };
}
pub(crate) use api;

/// The first API function this layer calls that the server lacks (Redis 6 and older, or an
/// unusual build); `None` on every server the module supports. Functions the layer asks for
/// optionally (`CachedMicroseconds`, `AddPostNotificationJob`, ...) are not listed: see server.rs.
pub fn first_missing() -> Option<&'static str> {
    macro_rules! check {
        ($($name:ident),* $(,)?) => {
            // SAFETY: reading pointers written once at load time, before this runs.
            $(if unsafe { ::redis_module::raw::$name }.is_none() { return Some(stringify!($name)); })*
        };
    }
    check!(
        RedisModule_CreateCommand,
        RedisModule_SetModuleOptions,
        RedisModule_StringPtrLen,
        RedisModule_ReplyWithError,
        RedisModule_ReplyWithArray,
        RedisModule_ReplyWithLongLong,
        RedisModule_Milliseconds,
        RedisModule_OpenKey,
        RedisModule_CloseKey,
        RedisModule_KeyType,
        RedisModule_ValueLength,
        RedisModule_StringDMA,
        RedisModule_StringTruncate,
        RedisModule_GetAbsExpire,
        RedisModule_SetAbsExpire,
        RedisModule_Replicate,
        RedisModule_NotifyKeyspaceEvent,
        RedisModule_SignalModifiedKey,
        RedisModule_GetContextFlags,
        RedisModule_GetSelectedDb,
        RedisModule_SelectDb,
        RedisModule_BlockClient,
        RedisModule_UnblockClient,
        RedisModule_SetDisconnectCallback,
        RedisModule_GetBlockedClientPrivateData,
        RedisModule_GetThreadSafeContext,
        RedisModule_FreeThreadSafeContext,
        RedisModule_ThreadSafeContextLock,
        RedisModule_ThreadSafeContextUnlock,
        RedisModule_ScanCursorCreate,
        RedisModule_ScanCursorDestroy,
        RedisModule_Scan,
        RedisModule_Call,
        RedisModule_CallReplyStringPtr,
        RedisModule_FreeCallReply,
        RedisModule_CreateString,
        RedisModule_FreeString,
        RedisModule_GetCurrentUserName,
        RedisModule_GetModuleUserFromUserName,
        RedisModule_FreeModuleUser,
        RedisModule_ACLCheckKeyPermissions,
        RedisModule_ACLCheckCommandPermissions,
        RedisModule_InfoBeginDictField,
        RedisModule_InfoEndDictField,
        RedisModule_ReplyWithMap,
        RedisModule_ReplyWithCString,
        RedisModule_ReplyWithStringBuffer,
        RedisModule_RegisterInfoFunc,
        RedisModule_GetCommand,
        RedisModule_SetCommandInfo,
        RedisModule_RegisterNumericConfig,
        RedisModule_LoadConfigs,
        RedisModule_IsKeysPositionRequest,
        RedisModule_KeyAtPos,
        RedisModule_InfoAddSection,
        RedisModule_InfoAddFieldULongLong,
        RedisModule_InfoAddFieldCString,
        RedisModule_RegisterStringConfig,
        RedisModule_RetainString,
        RedisModule_SubscribeToKeyspaceEvents,
        RedisModule_SubscribeToServerEvent,
        RedisModule_Log,
        RedisModule_ReplyWithNull,
        RedisModule_ZsetAdd,
        RedisModule_ZsetRem,
        RedisModule_ZsetScore,
        RedisModule_ZsetFirstInScoreRange,
        RedisModule_ZsetLastInScoreRange,
        RedisModule_ZsetRangeCurrentElement,
        RedisModule_ZsetRangeNext,
        RedisModule_ZsetRangePrev,
        RedisModule_ZsetRangeEndReached,
        RedisModule_ZsetRangeStop,
        RedisModule_GetDetachedThreadSafeContext,
        RedisModule_GetServerInfo,
        RedisModule_ServerInfoGetFieldUnsigned,
        RedisModule_FreeServerInfo,
    );
    None
}
