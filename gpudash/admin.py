from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User

from gpudash.models import AccessProfile


class AccessProfileInline(admin.StackedInline):
    model = AccessProfile
    can_delete = True
    verbose_name_plural = "namespace scope (empty = all namespaces)"


class GpudashUserAdmin(UserAdmin):
    # Roles are the groups viewer / operator / admin; the scope sits beside them on the user page.
    inlines = (*UserAdmin.inlines, AccessProfileInline)


admin.site.unregister(User)
admin.site.register(User, GpudashUserAdmin)


@admin.register(AccessProfile)
class AccessProfileAdmin(admin.ModelAdmin):
    list_display = ("user", "namespaces", "driver_namespaces")
    search_fields = ("user__username",)
